// label: benign
const csv = "id,name,score\n1,ann,90\n2,bo,85";
const [header, ...rows] = csv.split("\n").map(l => l.split(","));
const objs = rows.map(r => Object.fromEntries(r.map((v, i) => [header[i], v])));
console.log(objs);
