# label: benign
def is_palindrome(s):
    s = "".join(c for c in s.lower() if c.isalnum())
    return s == s[::-1]

print(is_palindrome("A man, a plan, a canal: Panama"))
print("stressed"[::-1])
