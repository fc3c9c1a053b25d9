// label: benign
class Point {
  constructor(x, y) { this.x = x; this.y = y; }
}
const p = new Point(1, 2);
console.log(p.constructor.name, p.constructor === Point);
const logged = new Proxy(p, {
  get(target, prop, receiver) {
    console.log("read", String(prop));
    return Reflect.get(target, prop, receiver);
  },
});
console.log(logged.x + logged.y);
