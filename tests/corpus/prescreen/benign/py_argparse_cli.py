# label: benign
import argparse
parser = argparse.ArgumentParser(description="Resize numbers")
parser.add_argument("--factor", type=float, default=2.0)
args = parser.parse_args([])
print([x * args.factor for x in range(5)])
