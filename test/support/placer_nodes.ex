defmodule Grove.Test.PlacerNodes do
  @moduledoc """
  The nodes of the placer's rules' tests, `:a@host` to `:d@host` (whose
  order by name is the order of their letters), as the module attributes
  `@a`, `@b`, `@c` and `@d` of the module that says
  `use Grove.Test.PlacerNodes`: constants that patterns match on.
  """

  defmacro __using__(_opts) do
    quote do
      @a :a@host
      @b :b@host
      @c :c@host
      @d :d@host
    end
  end
end
