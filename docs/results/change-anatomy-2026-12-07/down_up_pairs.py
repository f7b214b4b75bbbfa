"""The executor changes of one recorded run (record_changes.py) read as pairs: a scale-down and
the scale-up after it within an hour. Usage: python down_up_pairs.py RUN-changes.json.gz"""
import collections
import gzip
import json
import sys

changes = json.load(gzip.open(sys.argv[1]))["changes"]
minutes, held, where = [], [], collections.Counter()
for k in range(1, len(changes)):
    down, up = changes[k - 1], changes[k]
    if down["to"] < down["from"] and up["to"] > up["from"] and (up["h"] - down["h"]) * 60 < 60:
        minutes.append((up["h"] - down["h"]) * 60)
        if k >= 2:
            held.append((down["h"] - changes[k - 2]["h"]) * 60)
        where["back to the size before" if up["to"] == down["from"] else "above it" if up["to"] > down["from"] else "between"] += 1
minutes.sort()
held.sort()
print(f"{len(changes)} changes, {len(minutes)} down-up pairs within an hour ({2 * len(minutes) / len(changes):.0%} of the changes)")
print("minutes from the scale-down to the scale-up, median:", round(minutes[len(minutes) // 2], 1))
print("minutes the size before the scale-down was held, median:", round(held[len(held) // 2], 1))
print("the scale-up went:", dict(where))
