// label: benign
const reverse = s => s.split("").reverse().join("");
console.log(reverse("stressed"), reverse("drawer"));
