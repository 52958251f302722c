# `cmake --install` gives a complete, relocatable tree: installed, moved, run (label cpu).
add_test(NAME install_relocatable COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/install_test.sh ${CMAKE_BINARY_DIR})
set_tests_properties(install_relocatable PROPERTIES LABELS cpu TIMEOUT 300 ENVIRONMENT "${PT_TEST_ENV}")
