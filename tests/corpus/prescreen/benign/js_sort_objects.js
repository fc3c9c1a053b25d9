// label: benign
const people = [{ n: "ann", a: 31 }, { n: "bo", a: 27 }, { n: "cy", a: 45 }];
people.sort((x, y) => x.a - y.a);
console.log(people.map(p => p.n).join(" < "));
