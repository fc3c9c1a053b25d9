// label: benign
const raw = '{"users":[{"name":"ann","age":31},{"name":"bo","age":27}]}';
const data = JSON.parse(raw);
console.log(data.users.map(u => `${u.name} (${u.age})`).join(", "));
