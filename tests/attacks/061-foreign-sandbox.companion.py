# The companion of 061-foreign-sandbox.py: it runs beside the attack (runner: concurrent) and
# must end with "companion-alive" as its last line, which it prints only if its IPC objects
# were left alone.
import ctypes, errno, os, sys, time
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
KEY, IPC_CREAT = 0x7c0ffee, 0o1000
made = []
shm = libc.shmget(ctypes.c_int(KEY), ctypes.c_size_t(4096), ctypes.c_int(IPC_CREAT | 0o666))
addr = libc.shmat(shm, None, 0) if shm >= 0 else None
if addr not in (None, ctypes.c_void_p(-1).value):
    ctypes.memmove(addr, b"companion-secret", 16)
    made.append("shm")
if libc.msgget(ctypes.c_int(KEY), ctypes.c_int(IPC_CREAT | 0o666)) >= 0:
    made.append("msg")
if libc.semget(ctypes.c_int(KEY), ctypes.c_int(1), ctypes.c_int(IPC_CREAT | 0o666)) >= 0:
    made.append("sem")
print("made", made, flush=True)  # (the test starts the attack when this line comes)
start = time.time()
time.sleep(5)
end = time.time()
print("window", f"{start:.3f}", f"{end:.3f}", flush=True)
intact = "shm" not in made or ctypes.string_at(addr, 16) == b"companion-secret"
print("companion-alive" if intact else "companion-tampered", flush=True)
