import Config

# `make run`: a module saved while the world runs is compiled and loaded
# into it, state kept (see Grove.Reloader).
config :grove, reload: true
