// label: benign; set: heldout2
const store = new Map();
const method = "s" + "et";
store[method]("a", 1);
console.log(store.get("a"));
const name = "report";
const handler = `./handlers/${name}.js`;
console.log(handler);
