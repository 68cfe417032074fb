import torch, strided_apply as sa
big = 16384
dev = "cuda"
def rnd(shape, dt):
    if dt.is_floating_point:
        return (torch.rand(shape, device=dev) * 2 - 1).to(dt)
    return torch.randint(0, 255, shape, device=dev).to(dt)
for name, dt in (("u8", torch.uint8), ("bf16", torch.bfloat16), ("f32", torch.float32)):
    for kind in ("contig", "row"):
        a = rnd((big, big), dt)
        b = rnd((big, big) if kind == "contig" else (1, big), dt)
        out = torch.empty((big, big), device=dev, dtype=dt)
        sa.add(a, b, out=out)
        torch.cuda.synchronize()
        assert torch.equal(out, a + b), (name, kind)
        print(name, kind, "ok", flush=True)
        del a, b, out
