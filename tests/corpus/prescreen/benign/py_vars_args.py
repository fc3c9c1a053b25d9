# label: benign
import argparse

p = argparse.ArgumentParser()
p.add_argument("--rows", type=int, default=10)
p.add_argument("--name", default="sales")
args = p.parse_args([])
for key, value in vars(args).items():
    print(f"{key}: {value}")
opts = vars(args)
print(opts["rows"] * 2)
