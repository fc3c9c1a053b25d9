# attack: write one file larger than the file size limit (RLIMIT_FSIZE -> SIGXFSZ)
# limits: {"file_size_mb": 1, "workspace_mb": 64}
# expect: status=killed
# expect: killed_reason=disk
# expect: signal=SIGXFSZ
exec head -c 20000000 /dev/zero >/workspace/big
