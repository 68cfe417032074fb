import sys, torch, strided_apply as sa
def t(f, reps=30):
    for _ in range(3): f()
    ts=[]
    for _ in range(reps):
        s=torch.cuda.Event(enable_timing=True); e=torch.cuda.Event(enable_timing=True)
        s.record(); f(); e.record(); e.synchronize(); ts.append(s.elapsed_time(e))
    ts.sort(); return ts[len(ts)//2]
torch.manual_seed(0)
d=torch.float64
add=sa.expr("a + b")
seed=sa.expr("sin(a*b) + sqrt(c) + cos(a)/log(cos(b)+2)")
n=1<<26
a=torch.rand(n,device='cuda',dtype=d); b=torch.rand(n,device='cuda',dtype=d); c=torch.rand(n,device='cuda',dtype=d); o=torch.full((n,),float('nan'),device='cuda',dtype=d)
ms=t(lambda: add(a,b,out=o)); print(f"{sys.argv[1]} f64 add dense 2^26: {3*n*8/ms/1e6:.0f} GB/s")
ms=t(lambda: seed(a,b,c,out=o)); print(f"{sys.argv[1]} f64 seed dense 2^26: {4*n*8/ms/1e6:.0f} GB/s")
R,C=8192,8192
A=torch.rand(R,C,device='cuda',dtype=d); B=torch.rand(C,device='cuda',dtype=d); O=torch.empty(R,C,device='cuda',dtype=d)
ms=t(lambda: add(A,B,out=O)); print(f"{sys.argv[1]} f64 add row broadcast 8192^2: {(2*R*C+C)*8/ms/1e6:.0f} GB/s")
ar=torch.rand(1,C,device='cuda',dtype=d); bc=torch.rand(R,1,device='cuda',dtype=d)
ms=t(lambda: seed(ar,bc,A,out=O)); print(f"{sys.argv[1]} f64 seed broadcast 8192^2: {(2*R*C+R+C)*8/ms/1e6:.0f} GB/s")
