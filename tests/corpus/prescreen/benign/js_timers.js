// label: benign
const start = Date.now();
setTimeout(() => console.log("elapsed", Date.now() - start >= 10), 10);
