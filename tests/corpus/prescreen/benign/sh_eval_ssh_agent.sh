# label: benign
eval "$(ssh-agent -s)"
ssh-add -l || true
eval "$(dircolors -b)"
ls --color=auto
