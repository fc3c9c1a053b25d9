# label: benign
def is_palindrome(word):
    w = "".join(ch for ch in word.lower() if ch.isalnum())
    return w == w[::-1]

print(is_palindrome("A man, a plan, a canal: Panama"))
print("".join(reversed("stressed")))
shifted = "".join(chr(ord(c) + 1) for c in "HAL")
print(shifted)
print("Report".upper(), "TITLE".lower(), "a_b_c".replace("_", "-"))
