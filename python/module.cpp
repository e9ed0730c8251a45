// flashmace._core: the engine for Python (python/flashmace/__init__.py wraps it as an ASE
// calculator). Arrays cross as NumPy float64 / int arrays; errors as RuntimeError with flashmace's
// message.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "session.h"

namespace py = pybind11;
using flashmace::python::Results;
using flashmace::python::Session;

namespace {

using Doubles = py::array_t<double, py::array::c_style | py::array::forcecast>;
using Ints = py::array_t<int, py::array::c_style | py::array::forcecast>;

flashmace::Structure structure(const Ints& numbers, const Doubles& positions, const Doubles& cell,
                               const std::array<bool, 3>& pbc) {
  const py::ssize_t n = numbers.size();
  if (positions.ndim() != 2 || positions.shape(0) != n || positions.shape(1) != 3)
    throw py::value_error("positions must be [" + std::to_string(n) + ", 3]");
  if (cell.size() != 9) throw py::value_error("cell must be 3 x 3");
  flashmace::Structure s;
  s.atomic_numbers.assign(numbers.data(), numbers.data() + n);
  s.positions.assign(positions.data(), positions.data() + 3 * n);
  std::copy(cell.data(), cell.data() + 9, s.cell.begin());
  s.pbc = pbc;
  return s;
}

py::array_t<double> array(const std::vector<double>& v, std::vector<py::ssize_t> shape) {
  py::array_t<double> a(shape);
  std::copy(v.begin(), v.end(), a.mutable_data());
  return a;
}

}  // namespace

PYBIND11_MODULE(_core, m) {
  m.doc() = "flashmace's engine (the Python package's extension)";
  py::class_<Session>(m, "Session")
      .def(py::init<const std::string&, const std::map<std::string, std::string>&, double>(), py::arg("model"),
           py::arg("options"), py::arg("skin"))
      .def(
          "compute",
          [](Session& self, const Ints& numbers, const Doubles& positions, const Doubles& cell,
             const std::array<bool, 3>& pbc, bool per_atom) {
            const flashmace::Structure s = structure(numbers, positions, cell, pbc);
            Results r;
            {
              py::gil_scoped_release release;
              r = self.compute(s, per_atom);
            }
            const py::ssize_t n = s.size();
            py::dict out;
            out["energy"] = r.energy;
            out["forces"] = array(r.forces, {n, 3});
            out["virial"] = array({r.virial.begin(), r.virial.end()}, {3, 3});
            if (per_atom) {
              out["energies"] = array(r.energies, {n});
              out["atom_virial"] = array(r.atom_virial, {n, 6});
            }
            return out;
          },
          py::arg("numbers"), py::arg("positions"), py::arg("cell"), py::arg("pbc"), py::arg("per_atom"))
      .def_property_readonly("cutoff", [](const Session& self) { return self.evaluator().cutoff(); })
      .def_property_readonly("device", [](const Session& self) { return self.evaluator().device(); })
      .def_property_readonly("dtype", [](const Session& self) { return self.evaluator().dtype(); })
      .def_property_readonly("path", [](const Session& self) { return self.evaluator().path(); })
      .def_property_readonly("elements", [](const Session& self) { return self.evaluator().config().atomic_numbers; })
      .def_property_readonly("list_builds", &Session::list_builds)
      .def_property_readonly("counters", [](const Session& self) {
        const flashmace::EvaluationCounters c = self.counters();
        py::dict d;
        d["evaluations"] = c.evaluations;
        d["topology_builds"] = c.topology_builds;
        d["radial_pair_builds"] = c.radial_pair_builds;
        d["graph_captures"] = c.graph_captures;
        d["graph_replays"] = c.graph_replays;
        d["bucket_overflows"] = c.bucket_overflows;
        return d;
      });
  py::register_exception<flashmace::Error>(m, "Error", PyExc_RuntimeError);
  m.def("engine_option_keys", &flashmace::engine_option_keys);
}
