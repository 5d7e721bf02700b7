# A small Lens example set written for exfeed's samples: four two-event examples
# over a 4-unit input group and a 2-unit output group.
defI: 0 actI: 1 defT: 0 actT: 1;
name: {ab first} freq: 2 2
I: (in) 1 0 0 1  T: 1 0
i: {in} 1 2      t: 1;
name: ba 2
[0 max: 3] I: (in) 0 1 1 0  T: 0 1
[1] i: {in 0.5} 0 3  T: -  1;
name: flat 2
B: (0) 0.25 0.25
i: *  t: 0;
name: sparse-pair proc: {puts "opaque proc text"} 2
[*] i: {in} 0-3 T: 1 1;
