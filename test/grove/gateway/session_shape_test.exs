defmodule Grove.Gateway.SessionShapeTest do
  @moduledoc """
  A session is read and updated at every message of its connection: it
  stays a flat map (32 keys at most, its struct's name among them), where
  a larger one would be a hash map whose every field read and update
  hashes the key.
  """
  use ExUnit.Case, async: true

  alias Grove.Gateway.Session

  test "a session is a flat map" do
    assert map_size(%Session{}) <= 32
  end
end
