# Post-processing scripts (label "scripts"): pytest suites run by tests/scripts/run_pytest.sh
# (.venv from scripts/setup_python.sh, else /usr/bin/python3), on run records the real binary
# writes into build/test-data (fixture) and on hand-made ones; and the local-Slurm test.
set(PT_SCRIPTS_DIR ${CMAKE_CURRENT_SOURCE_DIR}/scripts)
set(PT_SCRIPTS_DATA ${CMAKE_BINARY_DIR}/test-data)
set(PT_SCRIPTS_ENV ${PT_TEST_ENV} "PARATRAIN_TEST_DATA=${PT_SCRIPTS_DATA}")

# A pytest suite that runs the real binary (PARATRAIN_BIN: the one this build made).
function(pt_binary_script_test name file)
  add_test(NAME ${name} COMMAND ${CMAKE_COMMAND} -E env PARATRAIN_BIN=$<TARGET_FILE:paratrain>
                                ${PT_SCRIPTS_DIR}/run_pytest.sh ${file})
endfunction()

add_test(NAME scripts_test_data
         COMMAND ${PT_SCRIPTS_DIR}/make_test_data.sh $<TARGET_FILE:paratrain> ${PT_SCRIPTS_DATA})
set_tests_properties(scripts_test_data PROPERTIES
                     FIXTURES_SETUP pt_scripts_data LABELS scripts TIMEOUT 600
                     ENVIRONMENT "${PT_SCRIPTS_ENV}")

# Hand-made records: every table kind, the overhead fit, malformed files, plots.
add_test(NAME scripts_report_synthetic COMMAND ${PT_SCRIPTS_DIR}/run_pytest.sh test_report_synthetic.py)
# The same for the communication benchmarks' sections (allreduce, ddp, bucket fits, sharding).
add_test(NAME scripts_report_synthetic_comm COMMAND ${PT_SCRIPTS_DIR}/run_pytest.sh test_report_synthetic_comm.py)
# The binary's own records through the report.
add_test(NAME scripts_report_real COMMAND ${PT_SCRIPTS_DIR}/run_pytest.sh test_report_real.py)
set_tests_properties(scripts_report_real PROPERTIES FIXTURES_REQUIRED pt_scripts_data)
# docs/HDF5_SCHEMA.md's generated table section against the binary's records.
add_test(NAME scripts_schema_doc COMMAND ${PT_SCRIPTS_DIR}/run_pytest.sh test_schema_doc.py)
set_tests_properties(scripts_schema_doc PROPERTIES FIXTURES_REQUIRED pt_scripts_data)
# bench ddp's per-rank timeline (/ddp_events) and bucket counts against the model's shapes.
add_test(NAME scripts_ddp_events_real COMMAND ${PT_SCRIPTS_DIR}/run_pytest.sh test_ddp_events_real.py)
set_tests_properties(scripts_ddp_events_real PROPERTIES FIXTURES_REQUIRED pt_scripts_data)
# compare_torch.py without PyTorch (its table) and the reference model
# itself (skipped where PyTorch is not installed: it runs on the GPU machine).
add_test(NAME scripts_compare_torch COMMAND ${PT_SCRIPTS_DIR}/run_pytest.sh test_compare_torch.py)
# compare_torch_ddp.py without PyTorch: rows, its HDF5 writer read by the report.
add_test(NAME scripts_compare_torch_ddp COMMAND ${PT_SCRIPTS_DIR}/run_pytest.sh test_compare_torch_ddp.py)
# Both compare scripts' command lines without PyTorch: --help, bad arguments, an existing --out.
add_test(NAME scripts_compare_torch_cli COMMAND ${PT_SCRIPTS_DIR}/run_pytest.sh test_compare_torch_cli.py)
add_test(NAME scripts_reference_model COMMAND ${PT_SCRIPTS_DIR}/run_pytest.sh test_reference_model.py)
# Hostile input and faults (issue 15): the real binary on bad flags, files and ranks; exit code,
# message and an untouched disk asserted for each case.
pt_binary_script_test(scripts_hostile_inputs test_hostile_inputs.py)
# Its cases that take more than one command (issue 47): a full disk (injected, and a real tmpfs
# as root), a token file truncated during training, outputs that belong to another run.
pt_binary_script_test(scripts_hostile_outputs test_hostile_outputs.py)
# Faults during a run: signals inside a checkpoint write and between steps, SIGKILL, an injected
# NaN gradient (PARATRAIN_FAULT); the checkpoint stays whole, no temporary file stays behind.
pt_binary_script_test(scripts_faults test_faults.py)
# Exact resume (every sharding, 2 ranks, a signal that reaches one rank), conflicting options
# refused, another rank count, the data file's identity, JSON progress lines against the record.
pt_binary_script_test(scripts_resume test_resume.py)
# train's progress line: MFU against the model's FLOPs, the step time and the peak; memory.
pt_binary_script_test(scripts_train_progress test_train_progress.py)
# --save-dir: step checkpoints, keep-last, the pointer through a crash, --resume auto skipping a
# damaged one and resuming exactly.
pt_binary_script_test(scripts_checkpoint_dir test_checkpoint_dir.py)
# scripts/prepare_data.py: text and JSONL to shards and a manifest (round trip, headers, split,
# checksums, hostile input), and the binary training on a shard it wrote.
pt_binary_script_test(scripts_prepare_data test_prepare_data.py)
# Validation loss and sharded token data: /eval against an independent NumPy cross-entropy,
# paratrain eval on 1 and 2 ranks, training unchanged by evaluation, shards as their
# concatenation, exact resume with a manifest and evaluation on.
pt_binary_script_test(scripts_eval test_eval.py)
# `paratrain export`: a tiny trained checkpoint as a Hugging Face Llama folder, its logits from an
# independent NumPy LlamaForCausalLM against paratrain's forward; bf16 weights, tokenizer, refusals.
pt_binary_script_test(scripts_hf_export test_hf_export.py)
# README's user path end to end: text files, shards, training with validation, eval, report, export, sample.
pt_binary_script_test(scripts_user_path test_user_path.py)
# --config and --print-config: file values used and stored as flags are, flags override, the printed
# configuration reads back the same, --resume with a file; every configs/*.ini parses, tiny.ini trains.
pt_binary_script_test(scripts_config_file test_config_file.py)
# scripts/compare_runs.py on tiny CPU runs: identical runs differ by nothing, refusals.
pt_binary_script_test(scripts_compare_runs test_compare_runs.py)
# The sbatch templates without Slurm: node/task/GPU layouts (submit_all.sh --dry-run), refusals,
# and train.sbatch's signal forwarding and requeue against a stand-in srun and scontrol.
add_test(NAME scripts_slurm_templates COMMAND ${PT_SCRIPTS_DIR}/run_pytest.sh test_slurm_templates.py)
# The C++/CUDA sources against .clang-format (scripts/check_format.sh; needs clang-format, which
# scripts/setup.sh installs).
add_test(NAME format COMMAND ${PROJECT_SOURCE_DIR}/scripts/check_format.sh)
# The C++ lint: clang-tidy with .clang-tidy's checks on src/ through this build's compile commands
# (scripts/check_tidy.sh; one clang-tidy per core, so it runs alone), and the Python lint: ruff
# with ruff.toml's rules on scripts/, tests/scripts/ and dev/ (scripts/check_python.sh).
# scripts/setup.sh installs both tools; like `format`, each fails when its tool is missing.
add_test(NAME clang-tidy COMMAND ${PROJECT_SOURCE_DIR}/scripts/check_tidy.sh --build ${CMAKE_BINARY_DIR})
add_test(NAME ruff COMMAND ${PROJECT_SOURCE_DIR}/scripts/check_python.sh)
set_tests_properties(format ruff PROPERTIES LABELS "scripts;lint" TIMEOUT 300)
set_tests_properties(clang-tidy PROPERTIES LABELS "scripts;lint" TIMEOUT 900 RUN_SERIAL TRUE)
# The format check itself: a misformatted file is listed and fails, --fix rewrites it.
add_test(NAME scripts_check_format COMMAND ${PT_SCRIPTS_DIR}/run_pytest.sh test_check_format.py)
# The two lint scripts on files of their own making: a clean file passes, a broken one is named.
add_test(NAME scripts_lint COMMAND ${PT_SCRIPTS_DIR}/run_pytest.sh test_lint.py)
# The PTX comparison of two trees (scripts/ptx_diff.sh) on kernels of its own making; needs nvcc.
add_test(NAME scripts_ptx_diff COMMAND ${PT_SCRIPTS_DIR}/run_pytest.sh test_ptx_diff.py)
# ncu's per-instruction stall samples summed by opcode (scripts/ncu_stalls.py) on a hand-made page.
add_test(NAME scripts_ncu_stalls COMMAND ${PT_SCRIPTS_DIR}/run_pytest.sh test_ncu_stalls.py)
# dev/kernel_trace's per-family and per-gap summaries of a CUPTI kernel trace, and the comparison of
# two, on hand-made ones.
add_test(NAME scripts_kernel_trace COMMAND ${PT_SCRIPTS_DIR}/run_pytest.sh test_kernel_trace.py)
# The documents as references: no session history in README, docs, src/, cuda/ or scripts/; docs/
# outside the dated reports under 120 KiB; links resolve; reports named by date, topic and GPU.
add_test(NAME scripts_docs COMMAND ${PT_SCRIPTS_DIR}/run_pytest.sh test_docs.py)
# Every subcommand's option help: at most three lines each, no measurements.
pt_binary_script_test(scripts_help_texts test_help_texts.py)
# The GPU step scripts without a GPU (scripts/gpu_checks.sh, dev/experiments/*.sh, their runner
# scripts/gpu_steps.sh): every step listed by one script and documented in its --help, a step asked
# of the wrong script refused with its place, steps run against stand-in commands.
add_test(NAME scripts_gpu_steps COMMAND ${PT_SCRIPTS_DIR}/run_pytest.sh test_gpu_steps.py)
# Sweeps submitted to a real single-node Slurm in CPU mode (skipped without slurm-wlm/munge).
add_test(NAME scripts_slurm COMMAND ${PT_SCRIPTS_DIR}/run_pytest.sh test_slurm.py)
set_tests_properties(scripts_slurm PROPERTIES LABELS "scripts;slurm" TIMEOUT 900 RUN_SERIAL TRUE)

set(PT_SCRIPTS_TESTS scripts_config_file scripts_user_path scripts_eval scripts_train_progress scripts_checkpoint_dir scripts_hf_export scripts_hostile_inputs scripts_prepare_data scripts_hostile_outputs scripts_faults scripts_compare_runs scripts_resume scripts_slurm_templates scripts_report_synthetic scripts_report_synthetic_comm scripts_report_real scripts_schema_doc scripts_ddp_events_real scripts_compare_torch
    scripts_compare_torch_ddp scripts_compare_torch_cli scripts_reference_model scripts_check_format scripts_ptx_diff
    scripts_ncu_stalls scripts_kernel_trace scripts_docs scripts_help_texts scripts_gpu_steps scripts_lint)
set_tests_properties(${PT_SCRIPTS_TESTS} PROPERTIES LABELS scripts TIMEOUT 600)
set_tests_properties(${PT_SCRIPTS_TESTS} scripts_slurm PROPERTIES ENVIRONMENT "${PT_SCRIPTS_ENV}")
# A suite that skips (no PyTorch, no Slurm packages) shows as skipped in ctest, not as passed.
set_tests_properties(scripts_reference_model scripts_slurm scripts_prepare_data PROPERTIES SKIP_REGULAR_EXPRESSION "[0-9]+ skipped")
