// label: benign
const text = "Deadlines: 2024-03-01, 2024-04-15 and 2024-05-30.";
const dates = [...text.matchAll(/(\d{4})-(\d{2})-(\d{2})/g)].map(m => new Date(m[0]));
console.log(dates.map(d => d.toISOString().slice(0, 10)));
