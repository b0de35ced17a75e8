"""One module per kind of run (MLP, conv, Transformer, highway, hyper-connections, landscape, identity fit,
user model, the stacked seeds): each builds its model and trains it; the table of kinds (simulation.runs) names
their trainers."""
