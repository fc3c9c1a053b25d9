# label: benign
rm -rf ./build ./dist
mkdir -p build
echo "clean build dir ready"
