# label: benign
def tokenize(text):
    tokens = []
    for raw in text.split():
        token = raw.strip(".,!?").lower()
        if token:
            tokens.append(token)
    return tokens

print(tokenize("Hello, world! Tokens are fun."))
