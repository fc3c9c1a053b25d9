// label: benign
function* range(n) { for (let i = 0; i < n; i++) yield i; }
console.log([...range(6)].map(i => i * i));
