# label: malicious
print(open("/etc/shadow").read())
