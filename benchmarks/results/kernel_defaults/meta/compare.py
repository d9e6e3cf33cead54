import json
def load(p):
    return {json.loads(l)["id"]: json.loads(l)["judges"] for l in open(p)}
a, b = load("/tmp/meta_old/judged.jsonl"), load("/tmp/meta_new/judged.jsonl")
ids = sorted(set(a) & set(b))
corr = sum(a[i]["liverag"].get("correctness") == b[i]["liverag"].get("correctness") for i in ids)
verd = sum(a[i]["pairwise"].get("verdict") == b[i]["pairwise"].get("verdict") for i in ids)
from collections import Counter
print(len(ids), "answers; liverag correctness same:", corr, "; pairwise verdict same:", verd)
for name, d in (("old", a), ("new", b)):
    print(name, Counter(d[i]["liverag"].get("correctness") for i in ids), Counter(d[i]["pairwise"].get("verdict") for i in ids), "attempts", sum(d[i]["liverag"].get("attempts", 1) + d[i]["pairwise"].get("attempts", 1) for i in ids))
