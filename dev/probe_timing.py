# The probes' timer (dev/probe_*.py, run on a GPU machine with the image's python3): the mean of
# `reps` back-to-back calls of fn between two CUDA events, after 5 warm-up calls.
import torch


def time_ms(fn, reps=50):
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    for _ in range(reps):
        fn()
    b.record()
    torch.cuda.synchronize()
    return a.elapsed_time(b) / reps
