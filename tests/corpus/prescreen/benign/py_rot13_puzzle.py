# label: benign; set: heldout2
import codecs

clue = input() if False else "Uryyb, jbeyq"
print(codecs.decode(clue, "rot13"))
print(codecs.encode("attack at dawn", "rot13"))
