import json,glob,statistics,sys
res={}
for f in sorted(glob.glob('*_[0-9].json')):
    v,i=f[:-5].rsplit('_',1)
    d=json.load(open(f))
    for r in d['runs']:
        key=(r['mode'],r['workers'])
        res.setdefault(key,{}).setdefault(i,{})[v]=r['seconds']['run']
for key,pairs in sorted(res.items()):
    ratios=[]
    for i,p in sorted(pairs.items()):
        vs=[x for x in p if x!='base89']
        if 'base89' in p and vs:
            ratios.append(p[vs[0]]/p['base89'])
            print(key,i,{k:round(x,1) for k,x in p.items()})
    if ratios: print(key,'ratios',[round(r,2) for r in ratios],'median',round(statistics.median(ratios),2))
