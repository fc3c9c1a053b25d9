# label: benign
import uuid, hashlib
ids = [str(uuid.uuid4()) for _ in range(3)]
print([hashlib.md5(i.encode()).hexdigest()[:8] for i in ids])
