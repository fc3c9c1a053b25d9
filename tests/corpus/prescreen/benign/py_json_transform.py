# label: benign
import json
records = json.loads('[{"id": 1, "tags": ["a", "b"]}, {"id": 2, "tags": []}]')
out = {r["id"]: len(r["tags"]) for r in records}
print(json.dumps(out, indent=2, sort_keys=True))
