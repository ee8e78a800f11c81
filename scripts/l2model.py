# A model of the L2 traffic of sm90's backward (docs/perf.md "Calls 48-51"): the blocks of a
# causal or full mask (128 keys, 64-query tiles, a KV head's group of query heads a block) on
# `slots` SMs in grid order, each step touching its Q, dO (16 KB each at d128) and fp32 dQ
# (32 KB) tiles in an LRU of C bytes; DRAM read = the misses, write = the dirty dQ evicted.
# Each block's speed is drawn within +-noise (0.02 calibrates full 16K at 2.0 GB against 2.1
# measured). Orders: walk 'headouter' (sm90 unpaired) or 'headinner'; rev (descending); alt
# (descending on even KV heads, ascending on odd); split (the group split); pair (sm90's
# pairs: heaviest with lightest, down then up, heads inner).
#   python3 scripts/l2model.py 16384 causal "{'noise':0.02,'jit':0.2}" "{'pair':True,'noise':0.02,'jit':0.2}"
# Pure Python: about 10 s a configuration at 16K, 2 minutes at 48K.
import sys, heapq
from collections import OrderedDict
def lists(mask, S, qt=64, kt=128):
    NQ, NK = S//qt, S//kt
    L = []
    for k in range(NK):
        if mask == 'full': L.append(list(range(NQ)))
        elif mask == 'causal': L.append(list(range(k*kt//qt, NQ)))
    return L
def sim(mask, S, H=8, G=8, D=128, slots=132, C=50e6, walk='headouter', ktfast=True, rev=False, rot=False, split=1, alt=False, noise=0.0, jit=0.0, pair=False):
    L = lists(mask, S)
    NK = len(L)
    order = sorted(range(NK), key=lambda k: -len(L[k]))
    blocks = []
    if pair:
        NKp = (NK + 1)//2
        jobs = [(p, NK-1-p) if NK-1-p != p else (p, None) for p in range(NKp)]
        for h in range(H*split):
            for j in jobs: blocks.append((h, j))
    elif ktfast:
        for h in range(H*split):
            for k in order: blocks.append((h, k))
    else:
        for k in order:
            for h in range(H*split): blocks.append((h, k))
    GP = G // split
    def steps(hb, k):
        if pair:
            kvh, part = hb // split, hb % split
            a, b = k
            for kk, desc in ((a, True), (b, False)):
                if kk is None: continue
                e = L[kk][::-1] if desc else L[kk]
                for q in e:
                    for g in range(GP): yield (kvh*G+part*GP+g, q)
            return
        kvh, part = hb // split, hb % split
        r_ = rev != (alt and kvh % 2 == 1)
        e = L[k][::-1] if r_ else L[k]
        n = len(e)
        r = (k*7) % n if rot and n else 0
        if walk == 'headouter':
            for g in range(GP):
                for i in range(n): yield (kvh*G+part*GP+g, e[(i+r) % n])
        else:
            for i in range(n):
                for g in range(GP): yield (kvh*G+part*GP+g, e[(i+r) % n])
    tile = 64*D*2
    cache = OrderedDict(); used = 0; rd = 0; wr = 0
    def touch(key, size, dirty=False):
        nonlocal used, rd, wr
        if key in cache:
            cache.move_to_end(key)
            if dirty: cache[key] = True
            return
        rd += size
        cache[key] = dirty; used += size
        while used > C:
            k2, d2 = cache.popitem(last=False)
            sz = 2*tile if k2[0] == 'dq' else tile
            used -= sz
            if d2: wr += sz
    import random
    rng = random.Random(1)
    bi = 0
    pq = []
    gens = [None]*slots
    speed = [1.0]*slots
    def start(s, t):
        nonlocal bi
        if bi >= len(blocks): gens[s] = None; return
        gens[s] = steps(*blocks[bi]); bi += 1
        speed[s] = 1.0 + noise*(2*rng.random()-1)
        heapq.heappush(pq, (t + 2*speed[s], s))
    for s in range(slots): start(s, 0.0)
    while pq:
        t, s = heapq.heappop(pq)
        try:
            h, q = next(gens[s])
        except StopIteration:
            start(s, t); continue
        touch(('q', h, q), tile); touch(('o', h, q), tile); touch(('dq', h, q), 2*tile, True)
        heapq.heappush(pq, (t + speed[s]*(1 + jit*(2*rng.random()-1)), s))
    wr += sum(2*tile for k, d in cache.items() if d)
    return rd/1e9, wr/1e9
if __name__ == '__main__':
    import ast
    S = int(sys.argv[1]); mask = sys.argv[2]
    for cfg in sys.argv[3:]:
        kw = ast.literal_eval(cfg)
        r, w = sim(mask, S, **kw)
        print(f"{mask:7s} {S} {cfg:60s}: read {r:6.2f} GB write {w:6.2f} GB", flush=True)
