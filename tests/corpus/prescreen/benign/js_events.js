// label: benign
const EventEmitter = require("events");
const bus = new EventEmitter();
bus.on("msg", m => console.log("got", m));
bus.emit("msg", "hello");
