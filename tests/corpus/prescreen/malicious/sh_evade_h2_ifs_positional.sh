# label: malicious; obfuscated: ifs,positional; evasion: computed_name; set: heldout2
IFS=_
c="w_h_o_a_m_i"
set -- $c
IFS=
"$*"
