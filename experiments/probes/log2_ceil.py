#!/usr/bin/env python3
"""Whether ceil(log2(x)) as the engines compute it equals ceil of the correctly rounded FP32 log2,
over every positive finite FP32 x (docs/recipes.md "Engine arithmetic": E8M0 exponents from log2):
torch.log2 on CUDA (eager), the same under torch.compile (Triton/libdevice), and in BF16 and FP16
(eager torch.log2 of a 16-bit tensor). The reference is log2 in FP64 rounded to FP32 (then to the
16-bit type), whose ceil differs from the exact ceil only where the FP32 rounding reaches an integer.
Prints the count of x where each differs from the reference, and the first few."""
import torch


def main():
    dev = "cuda"
    comp = torch.compile(lambda t: torch.ceil(torch.log2(t)))
    total = {"eager": 0, "compile": 0}
    first = {"eager": [], "compile": []}
    chunk = 1 << 28
    for start in range(1, 0x7F800000, chunk):
        end = min(start + chunk, 0x7F800000)
        bits = torch.arange(start, end, dtype=torch.int64, device=dev).to(torch.int32)
        x = bits.view(torch.float32)
        ref = torch.ceil(torch.log2(x.double()).float())
        for name, got in (("eager", torch.ceil(torch.log2(x))), ("compile", comp(x))):
            bad = (got != ref).nonzero().flatten()
            total[name] += bad.numel()
            for i in bad[:3].tolist():
                if len(first[name]) < 6:
                    first[name].append("%08x ref %g got %g" % (start + i, ref[i].item(), got[i].item()))
    for name in total:
        print("fp32 %-8s ceil(log2) differs from the correctly rounded one at %d inputs %s" % (name, total[name], first[name]))
    for dt in (torch.bfloat16, torch.float16):
        bits = torch.arange(1, 0x7F80 if dt == torch.bfloat16 else 0x7C00, dtype=torch.int32, device=dev).to(torch.int16)
        x = bits.view(dt)
        got = torch.ceil(torch.log2(x)).float()
        ref = torch.ceil(torch.log2(x.double()).to(dt).float())
        bad = (got != ref).nonzero().flatten()
        print("%s eager ceil(log2) (rounded to the dtype) differs at %d inputs %s" % (
            dt, bad.numel(), ["%04x" % (bits[i].item() & 0xFFFF) for i in bad[:6].tolist()]))


if __name__ == "__main__":
    main()
