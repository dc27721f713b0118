defmodule Grove.Preload do
  @moduledoc """
  Loads every module of Grove and of the applications it runs on, in one
  batch, before a test VM (or a test's peer node) runs anything.

  A release loads its modules as it boots; `mix test` loads each one the
  first time something calls it, one at a time through the code server,
  which every process of the VM waits on. Each such load waits its turn
  on other threads (the file read on a dirty I/O scheduler, the commit on
  every scheduler), so on a machine whose cores are shared by many busy
  processes a load that takes a millisecond when quiet takes a hundred or
  more: a VM's first world start, which loads about 40 modules, took
  4.7 s there against 42 ms quietly, where its CPU work alone is 18 to 27
  times slower. Loaded in one batch (`:code.ensure_modules_loaded/1`),
  the files are read at once and committed together, about a tenth of
  the cost per module on that machine.
  """

  @doc "Loads the modules of `:grove` and of the applications it lists; returns how many."
  @spec load() :: non_neg_integer()
  def load do
    apps =
      for app <-
            [:grove | Application.spec(:grove, :applications)] ++
              Application.spec(:grove, :included_applications),
          Application.load(app) in [:ok, {:error, {:already_loaded, app}}],
          do: app

    modules = Enum.flat_map(apps, &Application.spec(&1, :modules))

    # A module that cannot load (a NIF's library missing) fails where it is
    # used, as it would without this; the others are loaded all the same.
    _ = :code.ensure_modules_loaded(modules)
    length(modules)
  end
end
