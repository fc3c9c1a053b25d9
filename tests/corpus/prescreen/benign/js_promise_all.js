// label: benign
const sleep = ms => new Promise(r => setTimeout(r, ms));
Promise.all([1, 2, 3].map(async n => { await sleep(5); return n * 2; }))
  .then(v => console.log(v));
