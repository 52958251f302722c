# Distributed-area test registrations (included by tests/CMakeLists.txt).
#   dist_np2, _np3, _np4  every dist test on CPU ranks over MPI (NCCL ones skip without GPUs)
#   dist_nccl_np2, _np4   the NCCL variants only, label gpu (need 2 and 4 GPUs; skipped with fewer)
#   dist_ce_np2, _np4     the same with --comm-engine ce (collectives on registered buffers move by
#                         the copy engines: every DDP and ZeRO-1 equivalence test on that path)
#   dist_split_nodes_np4  4 ranks as 2 nodes x 2 (PARATRAIN_TEST_SPLIT_NODES): the node view on CPU
#                         ranks, and the NCCL suite over NCCL's network transport where 4 GPUs are
#   dist_abort_*          a failing rank ends the job (non-zero, no hang, the rank and op named)
if(NOT TARGET paratrain_tests_dist)
  return()
endif()

# A hung test ends in two minutes instead of the default five.
foreach(np ${PT_DIST_RANK_COUNTS})
  set_property(TEST dist_np${np} APPEND PROPERTY ENVIRONMENT "PARATRAIN_COMM_TIMEOUT_S=120")
endforeach()

foreach(np 2 4)
  add_test(NAME dist_nccl_np${np}
           COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${np} $<TARGET_FILE:paratrain_tests_dist>
                   --gtest_filter=*Nccl*)
  set_tests_properties(dist_nccl_np${np} PROPERTIES LABELS gpu TIMEOUT 900
                       ENVIRONMENT "${PT_TEST_ENV};PARATRAIN_COMM_TIMEOUT_S=120"
                       SKIP_REGULAR_EXPRESSION "\\[  SKIPPED \\]")
endforeach()

foreach(np 2 4)
  add_test(NAME dist_ce_np${np}
           COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${np} $<TARGET_FILE:paratrain_tests_dist>
                   --gtest_filter=*Nccl*:*CopyEngine*)
  set_tests_properties(dist_ce_np${np} PROPERTIES LABELS gpu TIMEOUT 900
                       ENVIRONMENT "${PT_TEST_ENV};PARATRAIN_COMM_TIMEOUT_S=120;PARATRAIN_TEST_COMM_ENGINE=ce"
                       SKIP_REGULAR_EXPRESSION "\\[  SKIPPED \\]")
endforeach()
# CPU ranks: the node view; GPUs (4 needed, else those tests skip): the NCCL suite between two
# emulated nodes, where copy engines must not serve and NCCL uses its network transport.
add_test(NAME dist_split_nodes_np4
         COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} 4 $<TARGET_FILE:paratrain_tests_dist>
                 --gtest_filter=*SplitNodes*:*Nccl*)
set_tests_properties(dist_split_nodes_np4 PROPERTIES LABELS dist TIMEOUT 900
                     ENVIRONMENT "${PT_TEST_ENV};PARATRAIN_COMM_TIMEOUT_S=120;PARATRAIN_TEST_SPLIT_NODES=2;PARATRAIN_TEST_COMM_ENGINE=auto")

add_executable(paratrain_comm_probe ${CMAKE_CURRENT_SOURCE_DIR}/parallel/probe/comm_probe.cpp)
target_link_libraries(paratrain_comm_probe PRIVATE paratrain_lib)
add_dependencies(paratrain_tests_dist paratrain_comm_probe)

set(PT_EXPECT_ABORT sh ${CMAKE_CURRENT_SOURCE_DIR}/parallel/probe/expect_abort.sh ${MPIEXEC_EXECUTABLE}
    $<TARGET_FILE:paratrain_comm_probe>)
add_test(NAME dist_abort_on_timeout_mpi
         COMMAND ${PT_EXPECT_ABORT} hang mpi "rank 0 of 2: communication failure in mpi all_reduce")
add_test(NAME dist_abort_on_error_mpi
         COMMAND ${PT_EXPECT_ABORT} throw mpi "rank 1 of 2: error: injected failure")
set_tests_properties(dist_abort_on_timeout_mpi dist_abort_on_error_mpi PROPERTIES
                     LABELS dist TIMEOUT 180 ENVIRONMENT "${PT_TEST_ENV}")
add_test(NAME dist_abort_on_timeout_nccl
         COMMAND ${PT_EXPECT_ABORT} hang nccl "rank 0 of 2: communication failure in nccl all_reduce")
add_test(NAME dist_abort_on_timeout_ce
         COMMAND ${PT_EXPECT_ABORT} hang ce "rank 0 of 2: communication failure in ce all_reduce")
set_tests_properties(dist_abort_on_timeout_nccl dist_abort_on_timeout_ce PROPERTIES
                     LABELS gpu TIMEOUT 180 ENVIRONMENT "${PT_TEST_ENV}" SKIP_RETURN_CODE 77)
