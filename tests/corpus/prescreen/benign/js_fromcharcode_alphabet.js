// label: benign
const letters = Array.from({ length: 26 }, (_, i) => String.fromCharCode(97 + i));
console.log(letters.join(""));
console.log("A".charCodeAt(0), String.fromCharCode(72, 105));
