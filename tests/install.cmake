# `cmake --install` gives a complete, relocatable tree: installed, moved, run (label cpu).
add_test(NAME install_relocatable COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/install_test.sh ${CMAKE_BINARY_DIR})
set_tests_properties(install_relocatable PROPERTIES LABELS cpu TIMEOUT 300 ENVIRONMENT "${PT_TEST_ENV}")
# The installed Slurm scripts on a real local Slurm, from the moved tree (skipped without Slurm).
add_test(NAME install_slurm COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/install_test.sh ${CMAKE_BINARY_DIR} slurm)
set_tests_properties(install_slurm PROPERTIES LABELS "cpu;slurm" TIMEOUT 600 RUN_SERIAL TRUE SKIP_RETURN_CODE 77
                     ENVIRONMENT "${PT_TEST_ENV}")
