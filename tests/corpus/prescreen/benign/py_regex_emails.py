# label: benign
import re
text = "contact alice@example.com or bob@example.org for details"
emails = re.findall(r"[\w.+-]+@[\w-]+\.[\w.]+", text)
pattern = re.compile(r"^(\d{4})-(\d{2})-(\d{2})$")
print(emails, bool(pattern.match("2024-01-31")))
