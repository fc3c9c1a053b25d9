# attack: spread a memory bomb over 4 processes (each under the limit, together over it)
# limits: {"memory_mb": 64}
# expect: status=killed
# expect: killed_reason=memory
# expect: stdout!~=survived
import os, time
kids = []
for i in range(4):
    pid = os.fork()
    if pid == 0:
        b = bytearray(30 << 20)
        for j in range(0, len(b), 4096):
            b[j] = 1
        time.sleep(30)
        os._exit(0)
    kids.append(pid)
for k in kids:
    os.waitpid(k, 0)
print("survived", flush=True)
