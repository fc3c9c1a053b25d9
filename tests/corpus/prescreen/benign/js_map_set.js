// label: benign
const m = new Map([["a", 1], ["b", 2]]);
m.set("c", 3);
const s = new Set([1, 2, 2, 3, 3, 3]);
console.log([...m.entries()], [...s]);
