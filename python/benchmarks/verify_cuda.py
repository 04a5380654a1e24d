"""Speed of kvq.verify on CUDA tensors (docs/python.md "Speed"): a 256 MiB BF16 tensor and a port's
NVFP4 outputs already on the GPU. The budget is kvq's quantize kernel plus one pass over the outputs
(a copy of the port's codes and scales), both timed with CUDA events over back-to-back launches (device
time, no launch or wait); each kvq.verify call is timed alone on the wall clock (it returns once its
stream is done). Every time is also given as bandwidth over the copy rate measured in the same run
(bytes read + written over a device-to-device copy of x). Rounds interleave the measurements; the
medians are printed.

    python python/benchmarks/verify_cuda.py [--mib 256] [--rounds 15] [--cols 128] [--profile]

--profile adds the device work of one kvq.verify call as torch.profiler (CUPTI) records it.
"""
import argparse
import statistics
import time

import torch

import kvq
from kvq import _kvq


def event_ms(work, repeats=5):
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(repeats):
        work()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / repeats


def call_ms(work, repeats=5):
    """Wall clock of a call that returns once its work is done (kvq.verify waits for its stream): each
    call timed alone, the median of `repeats`."""
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        work()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=256)
    parser.add_argument("--cols", type=int, default=128)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    rows = args.mib * 2**20 // 2 // args.cols
    g = torch.Generator(device="cuda").manual_seed(0)
    x = (torch.randn(rows, args.cols, device="cuda", generator=g) * 3).to(torch.bfloat16)
    copy = torch.empty_like(x)
    codes = torch.empty(rows, args.cols // 2, dtype=torch.uint8, device="cuda")
    scales = torch.empty(rows, args.cols // 16, dtype=torch.uint8, device="cuda")
    mine_codes, mine_scales = torch.empty_like(codes), torch.empty_like(scales)
    amax = x.abs().amax().float().item()
    g_decode = amax / 2688.0  # the nvfp4 recipe's rule, given to the port as a number
    stream = torch.cuda.current_stream().cuda_stream
    _kvq._quantize_on_device("nvfp4", x, codes, scales, g_decode, stream)  # the port's outputs: kvq's own
    torch.cuda.synchronize()

    x_bytes, out_bytes = x.numel() * 2, codes.numel() + scales.numel()
    work = {
        "copy x": (lambda: copy.copy_(x), 2 * x_bytes, event_ms),
        "quantize (kvq kernel)": (lambda: _kvq._quantize_on_device("nvfp4", x, mine_codes, mine_scales, g_decode, stream),
                                  x_bytes + out_bytes, event_ms),
        "one pass (copy outputs)": (lambda: (mine_codes.copy_(codes), mine_scales.copy_(scales)), 2 * out_bytes, event_ms),
        "quantize, called and waited for": (
            lambda: (_kvq._quantize_on_device("nvfp4", x, mine_codes, mine_scales, g_decode, stream),
                     torch.cuda.current_stream().synchronize()), x_bytes + out_bytes, call_ms),
        "kvq.verify, g given": (lambda: kvq.verify("nvfp4", x, codes, scales, global_scale=g_decode), x_bytes + 2 * out_bytes,
                                call_ms),
        "kvq.verify, g from amax": (lambda: kvq.verify("nvfp4", x, codes, scales), 2 * x_bytes + 2 * out_bytes, call_ms),
    }
    tiny = x[:16].clone(), codes[:16].clone(), scales[:16].clone()  # 16 rows: the call's fixed cost
    work["kvq.verify, 16 rows"] = (lambda: kvq.verify("nvfp4", *tiny, global_scale=g_decode), 0, call_ms)
    report = kvq.verify("nvfp4", x, codes, scales, global_scale=g_decode)
    assert report.exact, str(report)
    for name, (fn, _, timer) in work.items():
        timer(fn, 2)  # warm-up
    times = {name: [] for name in work}
    for _ in range(args.rounds):
        for name, (fn, _, timer) in work.items():
            times[name].append(timer(fn))
    median = {name: statistics.median(t) for name, t in times.items()}
    copy_gbps = work["copy x"][1] / median["copy x"] / 1e6
    print("device: %s; x %d x %d BF16 (%d MiB); NVFP4 codes + scales %.1f MiB; %d rounds, medians" %
          (torch.cuda.get_device_name(), rows, args.cols, x_bytes >> 20, out_bytes / 2**20, args.rounds))
    print("%-32s %10s %10s %9s" % ("measurement", "ms", "GB/s", "of copy"))
    for name, (fn, moved, timer) in work.items():
        gbps = moved / median[name] / 1e6
        print("%-32s %10.4f %10.1f %8.1f%%" % (name, median[name], gbps, 100 * gbps / copy_gbps))
    budget = median["quantize (kvq kernel)"] + median["one pass (copy outputs)"]
    for name in ("kvq.verify, g given", "kvq.verify, g from amax"):
        print("%s / (quantize + one pass) = %.3f" % (name, median[name] / budget))
    if args.profile:
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as p:
            for _ in range(3):
                kvq.verify("nvfp4", x, codes, scales, global_scale=g_decode)
            torch.cuda.synchronize()
        print(p.key_averages().table(sort_by="cuda_time_total", row_limit=12))


if __name__ == "__main__":
    main()
