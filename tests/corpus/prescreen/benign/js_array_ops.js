// label: benign
const nums = [5, 3, 8, 1, 9, 2];
const evens = nums.filter(n => n % 2 === 0);
const total = nums.reduce((a, b) => a + b, 0);
console.log(evens, total, Math.max(...nums));
