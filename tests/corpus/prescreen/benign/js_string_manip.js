// label: benign
const s = "The quick brown fox";
console.log(s.split(" ").reverse().join(" "));
console.log(s.toUpperCase(), s.length, s.replace(/o/g, "0"));
