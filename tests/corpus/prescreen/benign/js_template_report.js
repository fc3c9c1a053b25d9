// label: benign
const rows = [["cpu", 0.42], ["mem", 0.73]];
const report = rows.map(([k, v]) => `${k.padEnd(5)} ${(v * 100).toFixed(1)}%`).join("\n");
console.log(report);
