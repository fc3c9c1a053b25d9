// label: benign
const sales = [{ r: "eu", v: 10 }, { r: "us", v: 5 }, { r: "eu", v: 7 }];
const byRegion = sales.reduce((acc, s) => ({ ...acc, [s.r]: (acc[s.r] || 0) + s.v }), {});
console.log(byRegion);
